"""Several hosts on one machine (bench/hosts.py and tests/hosts/ use them): network namespaces on a bridge, each
with its own address, and a Ray node in each. Linux, as root."""
