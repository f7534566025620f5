"""The shapes the API answers with, shared by its routers. Every error, whatever its
status, is {"problems": [{"code", "path", "message"}]}: the domains' own problems
(tusklib/problems.py) as the pages show them, with the code's name."""
from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import Field


class ProblemOut(Schema):
    code: str = Field(description="A stable name: the domain's code (RANGE, REFERENCE, "
                                  "...) or the refusal's (STALE, NOT_FOUND, ...)")
    path: str = Field(description="The offending field's path in the document sent; "
                                  "\"\": the call as a whole")
    message: str


class ProblemsOut(Schema):
    problems: list[ProblemOut]


class JobOut(Schema):
    """A job the agent runs (queued, running, succeeded, failed): poll it until it is
    done. A commit-confirm change that succeeded is pending until `deadline`: confirm it
    before then or it rolls back by itself."""

    id: int
    kind: str
    state: str
    progress: int
    message: str
    error: str
    created_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    done: bool
    deadline: datetime | None = Field(
        description="A pending change's: unconfirmed, it rolls back then")
    revision: int | None = Field(description="The revision the job made or decided")
    outcome: str | None
    problems: list[ProblemOut] = Field(description="Why the agent refused, when it did")
    url: str


class RevisionSummaryOut(Schema):
    number: int
    created: datetime
    user: str
    action: str
    outcome: str


class CommitStateOut(Schema):
    """A commit-confirm domain's state as the agent last reported it."""

    confirmed: int | None = Field(description="The live, confirmed revision")
    pending: int | None = Field(description="The revision waiting to be confirmed")
    deadline: datetime | None = Field(description="When the pending one rolls back")
    seconds_left: int | None
    synced_at: datetime | None


class DiffOut(Schema):
    revision: int
    previous: int | None
    diff: str = Field(description="Unified diff from the previous revision to this one")


Document = dict[str, Any]
# the largest value of a PositiveIntegerField (PostgreSQL's integer): revision numbers and
# draft versions; job ids are bigint
INT_MAX = 2 ** 31 - 1
BIGINT_MAX = 2 ** 63 - 1
