"""Ratings: Elo, multi-player Elo from ranks, Bradley-Terry Elo fits, and a Plackett-Luce skill rating."""

from .elo import Elo, fit_elo
from .skill import SkillRating

__all__ = ["Elo", "SkillRating", "fit_elo"]
