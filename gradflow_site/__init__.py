"""Build-time helpers for the Gradient Flow guide: figures, quizzes, mkdocs hooks, benchmarks.

Kept apart from gradflow_ref so the reference implementation stays torch-only.
"""
