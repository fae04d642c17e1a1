"""The daily sales digest's logic, in plain Python: `digest` aggregates
rows, `summary` renders the result, `format` holds the hand-made formats.
Only `app.py` touches the jobhost entry point."""
