"""SeqGPT's prompts and answers: building the prompt, parsing the answer, checking and re-decoding values."""
