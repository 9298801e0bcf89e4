"""PySpark integration (planned; see the issues). Importing this module requires the `spark` extra."""
