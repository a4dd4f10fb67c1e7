"""Trajectories: a versioned JSONL log of every run and session, one writer, one reader.

``events`` is the schema (typed records, schema 2); ``writer.TraceWriter`` is the one place
events are written (and turned into the dicts ``on_event`` callbacks receive);
``reader.read_trace`` is the one place files are read, schema 1 files included;
``render`` draws a trace as a text tree (``rlm trace show``) or one self-contained HTML page
(``rlm trace html``).
"""

from rlm_runtime.trajectory.events import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    AnswerCheck,
    AssistShown,
    Cell,
    CellOutput,
    ContextAccess,
    ContextInfo,
    ContextStats,
    InvalidEvent,
    Iteration,
    Models,
    Record,
    RunEnd,
    RunRecord,
    RunStart,
    SessionEnd,
    SubCall,
    SystemPrompt,
    ToolCall,
    TraceStart,
    UnknownEvent,
    Usage,
    WorkerWait,
    parse_event,
)
from rlm_runtime.trajectory.reader import Run, Trace, TraceEvents, read_events, read_trace
from rlm_runtime.trajectory.render import render_html, render_tree
from rlm_runtime.trajectory.writer import TraceWriter, event_dict, to_record

__all__ = [
    "EVENT_TYPES", "SCHEMA_VERSION", "AnswerCheck", "AssistShown", "Cell", "CellOutput", "ContextAccess", "ContextInfo",
    "ContextStats", "InvalidEvent",
    "Iteration", "Models", "Record", "Run", "RunEnd", "RunRecord", "RunStart", "SessionEnd", "SubCall", "SystemPrompt", "ToolCall",
    "Trace", "TraceEvents", "TraceStart", "TraceWriter", "UnknownEvent", "Usage", "WorkerWait", "event_dict", "parse_event",
    "read_events", "read_trace", "render_html", "render_tree", "to_record",
]
