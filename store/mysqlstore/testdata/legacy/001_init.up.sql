-- mysqlstore 001: leases, the token counter, fences and the procedures.
-- Every statement can run again without harm. Times are microseconds since
-- the Unix epoch by the server's clock, read with SYSDATE(6) ({{now_us}}).

-- One row per lease name. Names, labels and instances are bytes (UTF-8
-- checked by the library), compared exactly: no collation folds case or
-- ignores trailing spaces.
CREATE TABLE IF NOT EXISTS {{leases}} (
    name            VARBINARY(255) NOT NULL PRIMARY KEY,
    holder_label    VARBINARY(128) NOT NULL,
    holder_instance VARBINARY(64)  NOT NULL,
    token           BIGINT         NOT NULL CHECK (token >= 0),
    seq             BIGINT         NOT NULL CHECK (seq >= 0),
    acquired_us     BIGINT         NOT NULL,
    renewed_us      BIGINT         NOT NULL,
    expires_us      BIGINT         NOT NULL,
    released        BOOLEAN        NOT NULL
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

DELIMITER //

-- acquire(name, label, instance, ttl_us): a new tenure when the lease is
-- absent, released or expired; otherwise nothing changes. One row:
-- acquired, holder_label, holder_instance, token, seq, remaining_us, decided_us
-- (the server's clock when it decided).
CREATE PROCEDURE IF NOT EXISTS {{acquire}}(
    IN p_name VARBINARY(255), IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_ttl_us BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_label VARBINARY(128);
    DECLARE v_instance VARBINARY(64);
    DECLARE v_token, v_seq, v_expires, v_now, v_next BIGINT;
    DECLARE v_released BOOLEAN;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    IF p_name IS NULL OR p_label IS NULL OR p_instance IS NULL OR p_ttl_us IS NULL OR p_ttl_us <= 0 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'tenure: acquire: arguments must not be null and the TTL must be positive';
    END IF;
    START TRANSACTION;
    -- Create the row as a released placeholder, or lock the existing one
    -- exclusively: racing acquisitions of one name queue here.
    INSERT INTO {{leases}} (name, holder_label, holder_instance, token, seq, acquired_us, renewed_us, expires_us, released)
    VALUES (p_name, '', '', 0, 0, 0, 0, 0, TRUE)
    ON DUPLICATE KEY UPDATE name = name;
    SELECT l.holder_label, l.holder_instance, l.token, l.seq, l.expires_us, l.released
      INTO v_label, v_instance, v_token, v_seq, v_expires, v_released
      FROM {{leases}} AS l WHERE l.name = p_name FOR UPDATE;
    -- The clock is read after the lock was granted.
    SET v_now = {{now_us}};
    IF v_released OR v_expires <= v_now THEN
        UPDATE {{tokens}} SET value = GREATEST(value, v_token) + 1 WHERE id = 1;
        IF ROW_COUNT() <> 1 THEN
            SIGNAL SQLSTATE '55000' SET MESSAGE_TEXT = 'tenure: the token counter row is missing; restore it above every token handed out';
        END IF;
        SELECT t.value INTO v_next FROM {{tokens}} AS t WHERE t.id = 1;
        UPDATE {{leases}} SET
            holder_label = p_label, holder_instance = p_instance, token = v_next, seq = 1,
            acquired_us = v_now, renewed_us = v_now, expires_us = v_now + p_ttl_us, released = FALSE
        WHERE name = p_name;
        COMMIT;
        SELECT TRUE AS acquired, p_label AS holder_label, p_instance AS holder_instance, v_next AS token,
               CAST(1 AS SIGNED) AS seq, GREATEST(0, v_now + p_ttl_us - {{now_us}}) AS remaining_us,
               v_now AS decided_us;
    ELSE
        COMMIT;
        SELECT FALSE AS acquired, v_label AS holder_label, v_instance AS holder_instance, v_token AS token,
               v_seq AS seq, GREATEST(0, v_expires - {{now_us}}) AS remaining_us,
               v_now AS decided_us;
    END IF;
END //

-- renew(batch): a compare-and-set on (holder, token, seq) per lease, still
-- held by the server's clock, for a JSON array of
-- [name, label, instance, token, seq, ttl_us]. Every lease of the batch is
-- locked first, then the clock is read once: the decision and the update
-- use that one reading. One row: a JSON array of
-- [ord, renewed, known, label, instance, token, seq, released, expires_us]
-- describing each lease before the update, the clock reading the decision
-- used (decided_us) and the clock at the end (now_us).
CREATE PROCEDURE IF NOT EXISTS {{renew}}(IN p_batch LONGTEXT CHARACTER SET utf8mb4)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_now, v_locked BIGINT;
    DECLARE v_report LONGTEXT CHARACTER SET utf8mb4;
    -- MariaDB cuts JSON_ARRAYAGG at group_concat_max_len (1 MB by default):
    -- the report is built with it raised, and the session's value is put
    -- back.
    DECLARE v_gcml BIGINT UNSIGNED DEFAULT @@SESSION.group_concat_max_len;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; SET SESSION group_concat_max_len = v_gcml; RESIGNAL; END;
    IF p_batch IS NULL OR NOT JSON_VALID(p_batch) THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'tenure: renew: the batch must be a JSON array';
    END IF;
    START TRANSACTION;
    -- Lock the batch's rows in batch order, by primary key only.
    SELECT COUNT(*) INTO v_locked
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (name VARBINARY(255) PATH '$[0]')) AS i
      STRAIGHT_JOIN {{leases}} AS l FORCE INDEX (PRIMARY) ON l.name = i.name
      FOR UPDATE;
    SET v_now = {{now_us}};
    SET SESSION group_concat_max_len = 4294967295;
    SELECT JSON_ARRAYAGG(JSON_ARRAY(
               i.ord,
               IF(l.name IS NOT NULL AND l.holder_label = i.label AND l.holder_instance = i.instance
                  AND l.token = i.token AND l.seq = i.seq AND NOT l.released AND l.expires_us > v_now, 1, 0),
               IF(l.name IS NULL, 0, 1),
               CONVERT(COALESCE(l.holder_label, '') USING utf8mb4),
               CONVERT(COALESCE(l.holder_instance, '') USING utf8mb4),
               COALESCE(l.token, 0), COALESCE(l.seq, 0), IF(COALESCE(l.released, TRUE), 1, 0), COALESCE(l.expires_us, 0)))
      INTO v_report
      FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (
               ord FOR ORDINALITY,
               name VARBINARY(255) PATH '$[0]', label VARBINARY(128) PATH '$[1]', instance VARBINARY(64) PATH '$[2]',
               token BIGINT PATH '$[3]', seq BIGINT PATH '$[4]')) AS i
      LEFT JOIN {{leases}} AS l FORCE INDEX (PRIMARY) ON l.name = i.name;
    SET SESSION group_concat_max_len = v_gcml;
    UPDATE JSON_TABLE(p_batch, '$[*]' COLUMNS (
               name VARBINARY(255) PATH '$[0]', label VARBINARY(128) PATH '$[1]', instance VARBINARY(64) PATH '$[2]',
               token BIGINT PATH '$[3]', seq BIGINT PATH '$[4]', ttl_us BIGINT PATH '$[5]')) AS i
      STRAIGHT_JOIN {{leases}} AS l FORCE INDEX (PRIMARY) ON l.name = i.name
      SET l.seq = l.seq + 1, l.renewed_us = v_now, l.expires_us = v_now + i.ttl_us
      WHERE l.holder_label = i.label AND l.holder_instance = i.instance AND l.token = i.token AND l.seq = i.seq
        AND NOT l.released AND l.expires_us > v_now AND i.ttl_us > 0;
    COMMIT;
    SELECT v_report AS report, v_now AS decided_us, {{now_us}} AS now_us;
END //

-- release(name, label, instance, token): expire the lease now when it is
-- held by this holder with this token, keeping the row and the counter.
-- One row: the number of leases released (0 or 1).
CREATE PROCEDURE IF NOT EXISTS {{release}}(
    IN p_name VARBINARY(255), IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_token BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    UPDATE {{leases}} SET released = TRUE, expires_us = {{now_us}}
    WHERE name = p_name AND holder_label = p_label AND holder_instance = p_instance AND token = p_token
      AND NOT released AND expires_us > {{now_us}};
    SELECT ROW_COUNT() AS released;
END //

-- get(name): the lease row with the server's clock, or no row.
CREATE PROCEDURE IF NOT EXISTS {{get}}(IN p_name VARBINARY(255))
    READS SQL DATA
    SQL SECURITY DEFINER
BEGIN
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_us, l.released, l.expires_us,
           {{now_us}} AS now_us
    FROM {{leases}} AS l
    WHERE l.name = p_name AND l.token > 0;
END //

-- list(): every lease row with the server's clock, in byte order of name.
CREATE PROCEDURE IF NOT EXISTS {{list}}()
    READS SQL DATA
    SQL SECURITY DEFINER
BEGIN
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_us, l.released, l.expires_us,
           {{now_us}} AS now_us
    FROM {{leases}} AS l
    WHERE l.token > 0
    ORDER BY l.name;
END //

-- fence(resource, token) records token as the highest token resource has
-- accepted, or raises SQLSTATE TF001 when a greater one was recorded
-- before. An equal token passes. It runs in the caller's transaction and
-- locks the resource's fence row until that transaction ends, so fenced
-- writes to one resource commit in token order; a rolled-back transaction
-- leaves the fence as it was.
CREATE PROCEDURE IF NOT EXISTS {{fence}}(IN p_resource VARBINARY(255), IN p_token BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_recorded, v_issued BIGINT;
    DECLARE v_msg VARCHAR(128);
    IF p_resource IS NULL OR p_token IS NULL THEN
        SIGNAL SQLSTATE '22004' SET MESSAGE_TEXT = 'tenure: fence: resource and token must not be null';
    END IF;
    IF p_token <= 0 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'tenure: fence: the token must be positive';
    END IF;
    -- A token above the counter was never handed out: a bug or an attack,
    -- which would otherwise refuse every legitimate writer from then on.
    SELECT t.value INTO v_issued FROM {{tokens}} AS t WHERE t.id = 1;
    IF p_token > COALESCE(v_issued, 0) THEN
        SET v_msg = CONCAT('tenure: fence: token never issued: issued=', COALESCE(v_issued, 0), ' offered=', p_token);
        SIGNAL SQLSTATE 'TF004' SET MESSAGE_TEXT = v_msg;
    END IF;
    INSERT INTO {{fences}} (resource, token, updated_us) VALUES (p_resource, p_token, {{now_us}})
    ON DUPLICATE KEY UPDATE
        updated_us = IF(token <= VALUES(token), VALUES(updated_us), updated_us),
        token = GREATEST(token, VALUES(token));
    SELECT f.token INTO v_recorded FROM {{fences}} AS f WHERE f.resource = p_resource FOR UPDATE;
    IF v_recorded > p_token THEN
        SET v_msg = CONCAT('tenure: fenced: stale token: recorded=', v_recorded, ' offered=', p_token);
        SIGNAL SQLSTATE 'TF001' SET MESSAGE_TEXT = v_msg;
    END IF;
END //

-- check_lease(name, token) returns when lease name is held with token by
-- the server's clock, read after the row lock was granted, and raises
-- SQLSTATE TF002 otherwise. It share-locks the lease row until the
-- caller's transaction ends: a takeover (and the holder's own renewal)
-- waits for that transaction.
CREATE PROCEDURE IF NOT EXISTS {{check_lease}}(IN p_name VARBINARY(255), IN p_token BIGINT)
    READS SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_token, v_expires BIGINT;
    DECLARE v_released BOOLEAN;
    DECLARE v_state VARCHAR(16);
    DECLARE v_msg VARCHAR(128);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_token = NULL;
    IF p_name IS NULL OR p_token IS NULL THEN
        SIGNAL SQLSTATE '22004' SET MESSAGE_TEXT = 'tenure: check lease: name and token must not be null';
    END IF;
    SELECT l.token, l.released, l.expires_us INTO v_token, v_released, v_expires
      FROM {{leases}} AS l WHERE l.name = p_name AND l.token > 0 LOCK IN SHARE MODE;
    SET v_state = CASE
        WHEN v_token IS NULL THEN 'absent'
        WHEN v_token <> p_token THEN 'superseded'
        WHEN v_released THEN 'released'
        WHEN v_expires <= {{now_us}} THEN 'expired'
    END;
    IF v_state IS NOT NULL THEN
        SET v_msg = CONCAT('tenure: fenced: lease not held: current=', COALESCE(v_token, 0), ' offered=', p_token, ' state=', v_state);
        SIGNAL SQLSTATE 'TF002' SET MESSAGE_TEXT = v_msg;
    END IF;
END //

-- check_lease_strict(name, token, label, instance, seq) is check_lease that
-- also requires the holder and the renewal seq to match, and advances seq
-- by one; its one row is the new seq, which the holder must renew with
-- next. A mismatch of holder or seq raises SQLSTATE TF003. It locks the
-- lease row exclusively until the caller's transaction ends: of two
-- byte-identical clones only one can pass.
CREATE PROCEDURE IF NOT EXISTS {{check_lease_strict}}(
    IN p_name VARBINARY(255), IN p_token BIGINT, IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_seq BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_token, v_expires, v_seq BIGINT;
    DECLARE v_label VARBINARY(128);
    DECLARE v_instance VARBINARY(64);
    DECLARE v_released BOOLEAN;
    DECLARE v_state VARCHAR(16);
    DECLARE v_msg VARCHAR(128);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_token = NULL;
    IF p_name IS NULL OR p_token IS NULL OR p_label IS NULL OR p_instance IS NULL OR p_seq IS NULL THEN
        SIGNAL SQLSTATE '22004' SET MESSAGE_TEXT = 'tenure: check lease strict: arguments must not be null';
    END IF;
    SELECT l.token, l.released, l.expires_us, l.holder_label, l.holder_instance, l.seq
      INTO v_token, v_released, v_expires, v_label, v_instance, v_seq
      FROM {{leases}} AS l WHERE l.name = p_name AND l.token > 0 FOR UPDATE;
    SET v_state = CASE
        WHEN v_token IS NULL THEN 'absent'
        WHEN v_token <> p_token THEN 'superseded'
        WHEN v_released THEN 'released'
        WHEN v_expires <= {{now_us}} THEN 'expired'
    END;
    IF v_state IS NOT NULL THEN
        SET v_msg = CONCAT('tenure: fenced: lease not held: current=', COALESCE(v_token, 0), ' offered=', p_token, ' state=', v_state);
        SIGNAL SQLSTATE 'TF002' SET MESSAGE_TEXT = v_msg;
    END IF;
    IF v_label <> p_label OR v_instance <> p_instance OR v_seq <> p_seq THEN
        SET v_msg = CONCAT('tenure: chain moved: cur=', v_token, ' off=', p_token, ' cur_seq=', v_seq, ' off_seq=', p_seq);
        SIGNAL SQLSTATE 'TF003' SET MESSAGE_TEXT = v_msg;
    END IF;
    UPDATE {{leases}} SET seq = seq + 1 WHERE name = p_name;
    SELECT v_seq + 1 AS seq;
END //

DELIMITER ;
