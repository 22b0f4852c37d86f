"""The database circuit (app/db/engine.py Circuit): while open, one trial per period, on an
injected clock."""

from __future__ import annotations

from app.db.engine import Circuit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_open_circuit_lets_one_trial_through_per_period_until_closed() -> None:
    clock = Clock()
    circuit = Circuit(trial_seconds=1.0, clock=clock)
    assert not circuit.open

    circuit.trip()
    assert circuit.open
    assert not circuit.claim_trial()  # no trial within the period that opened it
    clock.now += 0.99
    assert not circuit.claim_trial()
    clock.now += 0.01
    assert circuit.claim_trial()  # one trial ...
    assert not circuit.claim_trial()  # ... and no second in its period
    clock.now += 0.5
    circuit.trip()  # the trial failed: a full period again before the next
    clock.now += 0.9
    assert not circuit.claim_trial()
    clock.now += 0.1
    assert circuit.claim_trial()

    circuit.close()
    assert not circuit.open
