"""Rendering: rich tables for people, JSON for scripts, Chrome traces for timelines."""
