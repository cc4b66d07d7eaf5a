"""PBT, tournament and NSGA-II decisions, driven with hand-made reports (no learners)."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.ec import SearchSpace
from lamarckian.ec.nsga_ii import NSGA2, NSGA2Settings
from lamarckian.ec.pbt import PBT, PBTSettings
from lamarckian.ec.tournament import Tournament, TournamentSettings


def space() -> SearchSpace:
    return SearchSpace.from_config(load([], ["train.lr=[1e-4,1e-2]", "ec.log=[train.lr]", "rl.ppo.epochs=[1,8]"],
                                        ranges=True))


def report(fitness: float, tag: str, episodes=None, **summary) -> dict:
    """What a learner returns; ``state`` is a marker to follow inheritance."""
    return {"state": {"tag": tag}, "summary": {"fitness": fitness, **summary}, "cost": 100,
            "episodes": episodes if episodes is not None else [fitness] * 4}


def run_round(algorithm, fitness_of) -> list:
    """Ask every slot once, tell each its fitness; the individuals that reported."""
    asked = [algorithm.ask() for _ in range(algorithm.size)]
    for individual in asked:
        algorithm.tell(individual, report(fitness_of(individual), f"learned-by-{individual.id}"))
    return asked


def test_pbt_truncation_copies_the_top_and_perturbs():
    pbt = PBT(space(), 5, ["fitness"], 0, PBTSettings.defaults(quantile=0.2, factors=(0.8, 1.2)))
    first = run_round(pbt, lambda ind: float(ind.id))  # individual 4 best, individual 0 worst
    assert [m.id for m in pbt.slots] == [0, 1, 2, 3, 4]  # 0 reported first, alone: nothing to compare with
    again = pbt.ask()
    assert again.id == 0
    pbt.tell(again, report(-1.0, "learned-by-0"))  # still the worst: exploits now
    assert [m.id for m in pbt.slots[1:]] == [1, 2, 3, 4]  # only the bottom 20% (one of five) is replaced
    child = pbt.slots[0]
    assert child.id == 5
    assert child.parent == 4
    assert child.operator == "exploit+perturb"
    assert child.state == {"tag": "learned-by-4"}
    assert child.age == 0
    assert child.cost == first[4].cost
    donor = first[4].hparams
    assert child.hparams["train.lr"] in (pytest.approx(donor["train.lr"] * 0.8), pytest.approx(donor["train.lr"] * 1.2))
    assert child.hparams["rl.ppo.epochs"] in (max(1, min(8, round(donor["rl.ppo.epochs"] * f))) for f in (0.8, 1.2))
    assert pbt.ask() is pbt.slots[1]  # idle slots are handed out in order, the exploited one last
    assert child.fitness == 4.0
    assert not child.evaluated  # stands with its donor's score until it reports


def test_a_round_told_together_replaces_only_the_bottom_quantile():
    """A vectorized population reports all members at once: exploits are decided on those same standings (told one
    by one, each child standing with its donor's score would push the next member told into the bottom)."""
    pbt = PBT(space(), 4, ["fitness"], 0, PBTSettings.defaults(quantile=0.25, ready=1))
    for round_number in range(3):
        asked = [pbt.ask() for _ in range(4)]
        pbt.tell_round([(individual, report(float(slot), f"round-{round_number}"))
                        for slot, individual in enumerate(asked)])
        assert [m.age for m in pbt.slots[1:]] == [round_number + 1] * 3      # slots 1-3 keep their members
        assert pbt.slots[0].operator == "exploit+perturb"
        assert pbt.slots[0].parent == pbt.slots[3].id
    sequential = PBT(space(), 4, ["fitness"], 0, PBTSettings.defaults(quantile=0.25, ready=1))
    run_round(sequential, lambda individual: float(individual.id))
    run_round(sequential, lambda individual: float(individual.id % 4))
    assert sum(m.operator == "exploit+perturb" for m in sequential.slots) > 1   # the cascade told together avoids


def test_pbt_exploit_none_keeps_hyperparameters_and_weights():
    pbt = PBT(space(), 4, ["fitness"], 0, PBTSettings.defaults(exploit="none"))
    asked = run_round(pbt, lambda ind: float(ind.id))
    run_round(pbt, lambda ind: float(ind.id))
    assert [m.id for m in pbt.slots] == [0, 1, 2, 3]
    assert all(m.age == 2 for m in pbt.slots)
    assert [m.hparams for m in pbt.slots] == [a.hparams for a in asked]


def test_pbt_ttest_exploits_only_a_significantly_better_donor():
    pbt = PBT(space(), 2, ["fitness"], 0, PBTSettings.defaults(exploit="ttest", quantile=0.5))
    a, b = pbt.ask(), pbt.ask()
    pbt.tell(a, report(1.0, "a", episodes=[0.0, 2.0, 1.0, 1.0]))
    pbt.tell(b, report(1.1, "b", episodes=[0.1, 2.1, 1.2, 1.0]))  # better mean, not significantly
    assert [m.id for m in pbt.slots] == [0, 1]
    a = pbt.ask()
    pbt.tell(a, report(0.0, "a", episodes=[0.0, 0.01, 0.0, 0.02]))  # now clearly worse than b
    assert pbt.slots[0].parent == 1
    assert pbt.slots[0].state == {"tag": "b"}


def test_tournament_leaderboard_reseeds_only_from_a_better_entry_and_staggers():
    tournament = Tournament(space(), 3, ["fitness"], 0, TournamentSettings.defaults(leaderboard=4, temperature=0.01))
    asked = [tournament.ask() for _ in range(3)]
    assert [m.scale for m in asked] == pytest.approx([1 / 3, 2 / 3, 1.0])
    tournament.tell(asked[2], report(10.0, "strong"))
    assert tournament.slots[2].id == 2  # the best entry is itself: no re-seeding
    tournament.tell(asked[0], report(1.0, "weak"))  # temperature 0.01: the best entry is drawn
    reseeded = tournament.slots[0]
    assert reseeded.operator == "reseed"
    assert reseeded.parent == 2
    assert reseeded.state == {"tag": "strong"}
    assert reseeded.hparams == asked[2].hparams
    assert reseeded.scale == 1.0
    for fitness in (3.0, 4.0, 5.0):
        individual = tournament.ask()
        tournament.tell(individual, report(fitness, "x"))
    board = [e.fitness for e in tournament.leaderboard]
    assert len(board) == 4
    assert board == sorted(board, reverse=True)
    assert board[0] == 10.0


def test_nsga2_keeps_population_size_and_the_front():
    nsga = NSGA2(space(), 4, ["fitness", "lazy"], 0, NSGA2Settings.defaults(weight_noise=0.01))
    points = {0: (1.0, 0.0), 1: (0.0, 1.0), 2: (0.5, 0.5), 3: (0.1, 0.1)}
    for _ in range(4):
        individual = nsga.ask()
        nsga.tell(individual, report(points[individual.id][0], "fresh", lazy=points[individual.id][1]))
    child = nsga.ask()
    assert child.id == 4
    assert child.parent in points
    assert child.state == {"tag": "fresh"}
    assert child.operator in ("mutation", "sbx+mutation")
    assert child.weight_noise == 0.01
    for key, value in child.hparams.items():
        dimension = next(d for d in nsga.space if d.key == key)
        assert dimension.lo <= value <= dimension.hi
    nsga.tell(child, report(0.9, "child", lazy=0.9))  # dominates 2 and 3: 3 (dominated, last front) leaves
    assert sorted(m.id for m in nsga.population) == [0, 1, 2, 4]
    assert sorted(m.id for m in nsga.front()) == [0, 1, 4]


def test_state_round_trip_keeps_slots_idle_and_random_state():
    pbt = PBT(space(), 3, ["fitness"], 0, PBTSettings.defaults())
    run_round(pbt, lambda ind: float(ind.id))
    state = pbt.state_dict()
    clone = PBT(space(), 3, ["fitness"], 0, PBTSettings.defaults())
    clone.load_state_dict(state)
    assert [m.to_dict() for m in clone.slots] == [m.to_dict() for m in pbt.slots]
    assert clone.random.random() == pbt.random.random()
    assert clone.next_id == pbt.next_id
    assert sorted(clone.idle) == [0, 1, 2]
    np.testing.assert_equal(clone.ask().hparams, clone.slots[clone.slots.index(clone.slots[0])].hparams)


def test_pbt_ranks_the_members_by_the_first_objective():
    """``ec.objectives: [win]`` on Pong: the member that wins least is copied over, whatever its score margin (the
    evaluation's ``fitness``); bench/populations.py found PBT ranking by ``fitness`` whatever the objective."""
    pbt = PBT(space(), 2, ["win"], 0, PBTSettings.defaults(quantile=0.5))
    loser, winner = pbt.ask(), pbt.ask()
    pbt.tell(loser, report(4.0, "learned-by-loser", win=0.2))      # wide margins in the games it won, few wins
    pbt.tell(winner, report(1.0, "learned-by-winner", win=0.9))
    assert pbt.slots[1].fitness == 0.9
    again = pbt.ask()
    pbt.tell(again, report(4.0, "learned-by-loser", win=0.2))
    assert pbt.slots[0].state == {"tag": "learned-by-winner"}


def test_pbt_does_not_copy_a_member_that_only_ties():
    """Every member at CartPole's 500: the one that reports last ranks bottom of the sort but copying a member no
    better than itself only churns the population (bench/populations.py: 143 exploits in 148 rounds)."""
    pbt = PBT(space(), 4, ["fitness"], 0, PBTSettings.defaults(quantile=0.25))
    run_round(pbt, lambda individual: 500.0)
    member = pbt.ask()
    pbt.tell(member, report(500.0, "learned-by-itself"))
    assert [m.id for m in pbt.slots] == [0, 1, 2, 3]
