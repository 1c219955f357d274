"""`autotune worker --cluster ADDRESS`: join this machine to a Ray cluster as a measuring node."""
from __future__ import annotations

import click

from .cli import CLIError


@click.command()
@click.option("--cluster", required=True, metavar="ADDRESS",
              help="The cluster: ray://HOST:10001 (Ray Client) or HOST:6379 (the head's GCS).")
@click.option("--target", default="llvm", show_default=True, help="What this node measures for: llvm or cuda.")
@click.option("--devices", default=1, show_default=True, type=click.IntRange(1, 1024),
              help="Runner actors this node takes at once: one per device (a CPU is one device).")
@click.option("--num-cpus", type=click.IntRange(0, 4096), default=None,
              help="CPUs offered for builds (default: all; 0 keeps builds off this node while it times).")
@click.option("--node-ip-address", default=None, help="The address other nodes reach this one at (Ray's option).")
def worker(cluster: str, target: str, devices: int, num_cpus: int | None, node_ip_address: str | None) -> None:
    """Self-check, then serve as a measuring node of CLUSTER until stopped (Ctrl-C)."""
    try:
        from .cluster.worker import gcs_address, ray_start_command, self_check, serve
    except ModuleNotFoundError as exc:
        raise CLIError(f"a worker needs Ray ({exc}); pip install 'autotune[cluster]'") from exc
    gcs = gcs_address(cluster)                  # a bad or unreachable address: one line, exit 2
    key, result = self_check(target)
    if not result.ok:
        raise click.ClickException(f"self-check failed ({result.error_kind.value}): {result.error_msg}")
    click.echo(f"self-check passed: matmul built, run and checked for {key}", err=True)
    command = ray_start_command(gcs, key, devices, num_cpus, node_ip_address)
    click.echo(f"joining {cluster} as a measuring node: {' '.join(command)}", err=True)
    serve(command)
