"""What fair admission changes for two principals (engine/turns/admission.py).

The red team's case, scaled down: principal A starts FLOOD background turns of LONG seconds
on a server of LIMIT slots, then principal B starts one turn of SHORT seconds. Run once with
every slot open to one principal (UHP_MAX_TURNS_PER_PRINCIPAL = the limit: first come, first
served, as before) and once with the default share (one less than the limit). Prints B's
time to completion and the time A's flood takes to finish, for each.

    python bench/fairness.py [--limit N] [--flood N] [--long S] [--short S]

The engine runs in this process on stand-in turns (tests/support/fake_engine.py) whose length
the bench sets: it measures admission, not an agent.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from storage import keys
from tests.support.fake_engine import CONNECTION, StandInEngine
from uhp_server.engine.requests import EngineTask


def _task(principal_id: str, gate: str) -> EngineTask:
    return EngineTask(
        principal_id=principal_id,
        harness_id=None,
        input=f"WAIT {gate}",
        model_connection=CONNECTION,
        background=True,
    )


async def _scenario(
    limit: int, share: int | None, flood: int, long: float, short: float
) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as folder:
        engine = StandInEngine(Path(folder), max_turns=limit, per_principal=share)
        lengths: dict[str, float] = {}
        gates: dict[str, str] = {}
        ended: dict[str, float] = {}

        async def pace() -> None:
            """Ends each turn its length after its sandbox started."""
            seen = 0
            while True:
                started = engine.sandbox.started
                for process in started[seen:]:
                    response_id = process.mounts.labels["uhp.response"]
                    gate = engine.base.gate(gates[response_id])
                    asyncio.get_running_loop().call_later(lengths[response_id], gate.set)
                seen = len(started)
                await asyncio.sleep(0.005)

        try:
            a = engine.principal_id
            b = engine.db.run(keys.ensure_principal, "b").id
            pacing = asyncio.ensure_future(pace())
            begun = time.monotonic()
            ids_a = []
            for n in range(flood):
                rid = (await engine.engine.start(_task(a, f"a{n}"))).response_id
                gates[rid], lengths[rid] = f"a{n}", long
                ids_a.append(rid)
            await asyncio.sleep(0.05)  # the flood is in before B comes
            b_begun = time.monotonic()
            rid_b = (await engine.engine.start(_task(b, "b"))).response_id
            gates[rid_b], lengths[rid_b] = "b", short
            for principal, rid in [(b, rid_b), *((a, r) for r in ids_a)]:
                while not (await engine.engine.state(principal, rid)).terminal:
                    await asyncio.sleep(0.005)
                ended[rid] = time.monotonic()
            pacing.cancel()
            return ended[rid_b] - b_begun, max(ended[r] for r in ids_a) - begun
        finally:
            await engine.close()


async def main(args: argparse.Namespace) -> None:
    print(
        f"limit {args.limit}, A: {args.flood} turns of {args.long} s, B: 1 turn of {args.short} s"
    )
    print(f"{'admission':<40} {'B done after':>13} {'A flood done after':>19}")
    for label, share in (
        ("first come, first served (share=limit)", args.limit),
        ("fair (default share)", None),
    ):
        b_took, a_took = await _scenario(args.limit, share, args.flood, args.long, args.short)
        print(f"{label:<40} {b_took:>12.2f}s {a_took:>18.2f}s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--flood", type=int, default=5)
    parser.add_argument("--long", type=float, default=4.0)
    parser.add_argument("--short", type=float, default=0.2)
    _smoke.add_flag(parser)
    # Two slots and two of A's turns: B still comes in behind a full flood in both admissions.
    asyncio.run(main(_smoke.shrink(parser.parse_args(), limit=2, flood=2, long=0.3, short=0.05)))
