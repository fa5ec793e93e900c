"""Stages the gateway always runs, ahead of any configured ones."""
