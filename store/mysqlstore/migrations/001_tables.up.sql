-- mysqlstore 001: leases, the token counter, fences and the line. The
-- procedures, the run-time account's only way to them, live in
-- functions/, one file each, and are installed by every Migrate after the
-- migrations (see the package documentation). Every statement can run
-- again without harm. Times are microseconds since the Unix epoch by the
-- server's clock, read with SYSDATE(6).

-- One row per lease name. Names, labels and instances are bytes (UTF-8
-- checked by the library), compared exactly: no collation folds case or
-- ignores trailing spaces. payload is what the holder of the current or
-- last tenure published (store.AcquireParams.Payload: its address,
-- typically); empty when it published none. A renewal never changes it.
CREATE TABLE IF NOT EXISTS {{leases}} (
    name            VARBINARY(255)  NOT NULL PRIMARY KEY,
    holder_label    VARBINARY(128)  NOT NULL,
    holder_instance VARBINARY(64)   NOT NULL,
    token           BIGINT          NOT NULL CHECK (token >= 0),
    seq             BIGINT          NOT NULL CHECK (seq >= 0),
    acquired_us     BIGINT          NOT NULL,
    renewed_us      BIGINT          NOT NULL,
    expires_us      BIGINT          NOT NULL,
    released        BOOLEAN         NOT NULL,
    payload         VARBINARY(1024) NOT NULL DEFAULT ''
) ENGINE = InnoDB;

-- The token counter: one row, raised by every new tenure, never lowered.
-- Not AUTO_INCREMENT, whose counter older servers reset to MAX(id) + 1 on
-- restart and which a deleted row gives back.
CREATE TABLE IF NOT EXISTS {{tokens}} (
    id    TINYINT NOT NULL PRIMARY KEY CHECK (id = 1),
    value BIGINT  NOT NULL CHECK (value >= 0)
) ENGINE = InnoDB;

-- The highest token each resource accepted.
CREATE TABLE IF NOT EXISTS {{fences}} (
    resource   VARBINARY(255) NOT NULL PRIMARY KEY,
    token      BIGINT         NOT NULL,
    updated_us BIGINT         NOT NULL
) ENGINE = InnoDB;

-- The counter starts above every token already in the tables.
INSERT IGNORE INTO {{tokens}} (id, value)
SELECT 1, GREATEST(
    COALESCE((SELECT MAX(l.token) FROM {{leases}} AS l), 0),
    COALESCE((SELECT MAX(f.token) FROM {{fences}} AS f), 0));

-- The followers that asked to wait for a lease (store.AcquireParams.Wait),
-- first come first by ticket (see acquire_or_wait).
CREATE TABLE IF NOT EXISTS {{waiters}} (
    name            VARBINARY(255) NOT NULL,
    holder_label    VARBINARY(128) NOT NULL,
    holder_instance VARBINARY(64)  NOT NULL,
    ticket          BIGINT         NOT NULL AUTO_INCREMENT,
    until_us        BIGINT         NOT NULL,
    PRIMARY KEY (name, holder_label, holder_instance),
    KEY ticket (ticket),
    KEY line (name, ticket)
) ENGINE = InnoDB;
