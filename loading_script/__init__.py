"""The builder and the features of every TCMQA config (see ``tcmqa.py``)."""
