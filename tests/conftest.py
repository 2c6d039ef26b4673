"""Shared test configuration; the real-peer fixtures live in tests/plugins/ (sshd test bed, PostgreSQL, Slurm)."""

pytest_plugins = [
    "tests.plugins.timing", "tests.plugins.sshd", "tests.plugins.pg", "tests.plugins.browser", "tests.plugins.slurm",
]  # fmt: skip
