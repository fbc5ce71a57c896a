"""``tracecli status``: what this directory's session remembers."""

from __future__ import annotations

import click

from .results import StatusResult
from .group import cli
from .inputs import session
from .output import Output, emit, json_option


@cli.command()
@json_option("Print the state as JSON.")
@click.pass_context
def status(ctx, **kw):
    """What this directory's session remembers (./.tracecli/; delete it to reset)."""
    emit(StatusResult(session(ctx)), Output.pop(kw))
