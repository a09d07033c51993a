-- tenure registry 001: agents, ownerships and the reassignment history.
-- Every statement can run again without harm.

-- One row per agent id. Rows are never deleted by the registry: an agent
-- that leaves is marked deregistered, and an ownership must always be able
-- to name its agent's last heartbeat.
CREATE TABLE IF NOT EXISTS {{agents}} (
    id                     text        PRIMARY KEY,
    -- The process currently registered under id, and its heartbeat chain:
    -- a heartbeat is a compare-and-set on (id, instance, seq).
    instance               text        NOT NULL,
    seq                    bigint      NOT NULL CHECK (seq > 0),
    -- Nonce of the heartbeat that set seq, so a heartbeat whose reply was
    -- lost can be recognised by the process that sent it.
    beat_nonce             text        NOT NULL DEFAULT '',
    address                text        NOT NULL,
    labels                 jsonb       NOT NULL DEFAULT '{}'::jsonb,
    capacity               jsonb,
    heartbeat_interval_us  bigint      NOT NULL CHECK (heartbeat_interval_us > 0),
    stale_after_us         bigint      NOT NULL CHECK (stale_after_us >= 2 * heartbeat_interval_us),
    registered_at          timestamptz NOT NULL,
    heartbeat_at           timestamptz NOT NULL,
    -- Time between the last two heartbeats, by the store's clock.
    last_gap_us            bigint      NOT NULL DEFAULT 0,
    deregistered           boolean     NOT NULL DEFAULT false,
    -- Heartbeats refused under this id (another instance, or a clone).
    conflicts              bigint      NOT NULL DEFAULT 0,
    last_conflict_at       timestamptz,
    last_conflict_instance text
);

-- Which agent owns a resource pinned to one host. ON DELETE RESTRICT: an
-- agent row cannot vanish while it owns something, so an ownership never
-- turns into "no owner" behind anyone's back.
CREATE TABLE IF NOT EXISTS {{owners}} (
    resource   text        PRIMARY KEY,
    agent_id   text        NOT NULL REFERENCES {{agents}} (id) ON DELETE RESTRICT,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    metadata   jsonb
);

CREATE INDEX IF NOT EXISTS {{owners_agent_idx}} ON {{owners}} (agent_id);

-- Every operator reassignment, with its reason.
CREATE TABLE IF NOT EXISTS {{reassignments}} (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource            text        NOT NULL,
    from_agent          text        NOT NULL,
    to_agent            text        NOT NULL,
    reason              text        NOT NULL CHECK (reason <> ''),
    from_alive          boolean     NOT NULL,
    from_last_heartbeat timestamptz,
    reassigned_at       timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS {{reassignments_idx}} ON {{reassignments}} (resource, id);
