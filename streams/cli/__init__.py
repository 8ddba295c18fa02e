"""`seqstream ...`: the command line, and the terminal views of topics it prints."""
