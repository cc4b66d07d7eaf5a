"""The chaos harness's parts (bench/chaos.py runs them): processes of a job found in /proc, faults injected into
them, the job's progress read back, and the report. Linux only (it reads /proc; the full disk mounts a tmpfs, as
root)."""
