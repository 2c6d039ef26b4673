"""orch: multi-host GPU benchmark orchestration (doctor, deploy, run suites over SSH, store and serve results)."""

__version__ = "0.1.0"
