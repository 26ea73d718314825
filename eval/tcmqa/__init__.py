"""TCMQA: builder front-end, evaluation harness, analyses, queue and worker."""

__version__ = "0.1.0"
