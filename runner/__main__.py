import sys

try:
    from runner.cli import main
except ModuleNotFoundError as error:  # `python3 -m runner` from a checkout whose dependencies are not installed
    if not error.name or error.name.startswith("runner"):
        raise
    sys.exit(f"error: attnbench needs {error.name}, which this Python lacks: install the project first "
             "(make .venv/.installed, then .venv/bin/attnbench or .venv/bin/python -m runner)")

sys.exit(main())
