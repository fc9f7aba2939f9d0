"""Evals: datasets of cases, scorers ``(case, run) -> Score``, running a dataset as real tasks or
scoring recorded ones, reports, and online scoring of tasks as they end (docs/evaluating.md).

Public names are re-exported from :mod:`noeta.sdk.testing`."""
