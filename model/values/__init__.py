"""Typed values: what a phone, date, amount, ID number, e-mail, name or organisation looks like, and
their normal forms."""
