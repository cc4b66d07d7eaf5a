"""Several hosts on one machine (tests/hosts/ and bench/rpc.py --hosts use them): network namespaces on a bridge, each
with its own address, and a Ray node in each. Linux, as root."""
