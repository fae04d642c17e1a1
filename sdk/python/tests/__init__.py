"""Native tests of the jobhost Python SDK."""
