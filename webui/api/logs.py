"""The firewall's log (docs/LOGS.md): the packets the policy logs, newest first, with the
Logs page's filters - the page's own form checks them - and paged backwards in time:
each answer's `next` is the query of the page before it (older records)."""
import dataclasses
import urllib.parse
from datetime import UTC, datetime

from ninja import Query, Router, Schema, Status
from pydantic import Field

from logs import services
from logs.core.constants import TAIL_MAX

from .auth import READ
from .errors import problem
from .schemas import ProblemsOut

router = Router(tags=["logs"])


class LogFilter(Schema):
    since: datetime | None = Field(None, description="From (UTC)")
    until: datetime | None = Field(None, description="To (UTC); the next page's is the "
                                                     "oldest record's time")
    cls: str | None = Field(None, max_length=40, description="A class name, or (default) "
                                                             "for the default deny")
    verdict: str | None = Field(None, max_length=8)
    zone: str | None = Field(None, max_length=40, description="In or out")
    address: str | None = Field(None, max_length=50, description="An address or a prefix, "
                                                                 "source or destination")
    port: int | None = Field(None, ge=1, le=65535)
    protocol: str | None = Field(None, max_length=8)
    limit: int = Field(100, ge=1, le=TAIL_MAX)
    before: float | None = Field(None, ge=0, le=2 ** 33, description="Only records older "
                                 "than this Unix time: the next page's, from `next`")


class RecordOut(Schema):
    time: datetime
    verdict: str
    cls: str = Field(description="The class; \"\" for the default deny")
    interface_in: str
    interface_out: str
    protocol: str
    source: str
    destination: str
    source_port: int | None
    destination_port: int | None
    icmp: str
    tcp_flags: str
    length: int | None


class LogsOut(Schema):
    records: list[RecordOut]
    complete: bool = Field(description="False: the scan budget ran out before the log's "
                                       "start; narrow the filters or page on")
    next: str | None = Field(description="The query of the older records, null at the end")


def _form_data(filters):
    data = {}
    for name, value in filters.dict().items():
        if value is None or name == "before":
            continue
        data[name] = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") \
            if isinstance(value, datetime) else str(value)
    return data


@router.get("", response={200: LogsOut, 422: ProblemsOut}, auth=READ,
            summary="The log's records, newest first, filtered", operation_id="logs_list")
def list_logs(request, filters: Query[LogFilter]):
    _, zones, classes = services.confirmed()
    data = _form_data(filters)
    found = services.search({**data, "limit": str(filters.limit)}, zones, classes,
                            before=filters.before)
    if found.form.errors:
        return Status(422, {"problems": [
            problem("INVALID", name if name != "__all__" else "", message)
            for name, messages in found.form.errors.items() for message in messages]})
    if found.search is None:
        return Status(422, {"problems": [problem("IO", "", found.error)]})
    out = [{**dataclasses.asdict(record), "time": record.when,
            "protocol": record.protocol_name} for record in found.search.records]
    older = None
    if len(out) == filters.limit:
        older = "?" + urllib.parse.urlencode(
            {**filters.dict(exclude_none=True), "before": found.search.records[-1].time})
    return {"records": out, "complete": found.search.complete, "next": older}
