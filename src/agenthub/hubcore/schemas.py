"""Wire shapes of hub-core (pydantic); separate from the ORM models on purpose.

`MessageRead` is State Hub's list shape field for field, so a reader can switch
between the two without changing its parser (a test holds the two equal).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict


class MessageRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    from_agent: str
    to_agent: str
    subject: str
    body: str
    thread_id: uuid.UUID | None
    read_at: datetime | None
    archived_at: datetime | None
    kind: str
    expires_at: datetime | None
    supersedes_id: uuid.UUID | None
    created_at: datetime
