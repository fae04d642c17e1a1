"""An exception class from a module of its own, for the probe's `raise-custom`."""


class AmountError(Exception):
    """A made-up report error."""
