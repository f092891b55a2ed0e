"""What the pipeline keeps of one gcp cluster, in the folder the rules name
(``results/clusters/<label>``): endpoints, released marker, row lock, host keys, the grown
load generators."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ybscale.backends.base import BackendError


@dataclass(frozen=True)
class ClusterFiles:
    """What the pipeline keeps of one combination's cluster, in the folder the rules name
    (``results/clusters/<label>``): endpoints, released marker, row lock, host keys."""

    folder: Path

    @classmethod
    def of(cls, clusters: Path | str, combo: str) -> ClusterFiles:
        return cls(Path(clusters) / combo)

    @property
    def combination(self) -> str:
        return self.folder.name

    @property
    def endpoints(self) -> Path:
        return self.folder / "endpoints.json"

    @property
    def released(self) -> Path:
        """The marker `cluster_down` writes once the stack is destroyed."""
        return self.folder / "released.json"

    @property
    def known_hosts(self) -> Path:
        """Host keys of this cluster's incarnation (removed by up/down: new VMs, new keys)."""
        return self.folder / "known_hosts"

    @property
    def grown(self) -> Path:
        """With gcp.load_generators: auto, the endpoints after the cluster's load generators
        grew (`clusters.grow`): its later rows start from them; removed by up and down."""
        return self.folder / "load_generators.json"

    def with_growth(self, endpoints: dict) -> dict:
        """`endpoints`, or the same cluster's after its load generators grew (same creation
        time: not a former incarnation's)."""
        try:
            grown = json.loads(self.grown.read_text())
        except (OSError, ValueError):
            return endpoints
        return grown if grown.get("created") == endpoints.get("created") else endpoints

    @contextmanager
    def lock(self) -> Iterator[None]:
        """One row at a time per cluster (its single load generator); rows of different
        clusters run in parallel. An flock on ``measure.lock``, released on exit."""
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "measure.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def forget(self) -> None:
        """Remove what is known of a cluster that no longer exists (endpoints, host keys), so
        the next run brings it up again instead of SSHing into deleted VMs."""
        self.endpoints.unlink(missing_ok=True)
        self.known_hosts.unlink(missing_ok=True)
        self.grown.unlink(missing_ok=True)

    def load(self) -> dict:
        """endpoints.json of a live cluster; BackendError when missing or already destroyed."""
        path = self.endpoints
        if not path.exists():
            raise BackendError(
                f"{path}: missing; the cluster_up rule (python -m ybscale.backends.gcp.clusters up "
                f"--combo {self.combination}) brings this cluster up"
            )
        endpoints = json.loads(path.read_text())
        gone = self.released
        if gone.exists() and json.loads(gone.read_text()).get("destroyed", "") >= endpoints.get(
            "created", ""
        ):
            raise BackendError(
                f"{path}: the cluster was destroyed since ({gone}); bring it up again"
            )
        return endpoints
