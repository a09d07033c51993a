-- mysqlstore 003: followers wait in line.
--
-- waiters holds the followers that asked to wait for a lease
-- (store.AcquireParams.Wait), first come first by ticket. A follower keeps
-- its place while it keeps asking; it is forgotten at until_us, twice its
-- TTL after the expiry it was last told (rows past it are ignored, and
-- deleted by the next acquisition of the lease).
--
-- MySQL announces nothing, so followers come back at the expiry they were
-- told: the first in line at once, the others a moment later
-- (store.Handoff), so that an expiry costs the store the first follower's
-- acquisition rather than one per follower. A released lease is not kept
-- for the first in line: nobody would hear of the release sooner than the
-- expiry it was told.
--
-- acquire_or_wait is acquire_lease of 002 with a sixth argument (wait)
-- and a ninth column (position: the caller's place in line, 1 next, 0
-- none). acquire_lease stays, so that workers of an older library keep
-- working until they are upgraded; the run-time account needs the GRANTs
-- of Config.GrantSQL again for the new procedure. Every statement can run
-- again without harm.

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

DELIMITER //

CREATE PROCEDURE IF NOT EXISTS {{acquire_or_wait}}(
    IN p_name VARBINARY(255), IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_ttl_us BIGINT,
    IN p_payload VARBINARY(1024), IN p_wait BOOLEAN)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_label VARBINARY(128);
    DECLARE v_instance VARBINARY(64);
    DECLARE v_token, v_seq, v_expires, v_now, v_next, v_ticket BIGINT;
    DECLARE v_released BOOLEAN;
    DECLARE v_payload VARBINARY(1024);
    DECLARE v_position BIGINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    IF p_name IS NULL OR p_label IS NULL OR p_instance IS NULL OR p_ttl_us IS NULL OR p_ttl_us <= 0
       OR p_payload IS NULL OR p_wait IS NULL THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'tenure: acquire: arguments must not be null and the TTL must be positive';
    END IF;
    START TRANSACTION;
    -- Create the row as a released placeholder, or lock the existing one
    -- exclusively: racing acquisitions of one name, and so the changes of
    -- its line, queue here.
    INSERT INTO {{leases}} (name, holder_label, holder_instance, token, seq, acquired_us, renewed_us, expires_us, released)
    VALUES (p_name, '', '', 0, 0, 0, 0, 0, TRUE)
    ON DUPLICATE KEY UPDATE name = name;
    SELECT l.holder_label, l.holder_instance, l.token, l.seq, l.expires_us, l.released, l.payload
      INTO v_label, v_instance, v_token, v_seq, v_expires, v_released, v_payload
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
            acquired_us = v_now, renewed_us = v_now, expires_us = v_now + p_ttl_us, released = FALSE,
            payload = p_payload
        WHERE name = p_name;
        DELETE FROM {{waiters}}
        WHERE name = p_name AND ((holder_label = p_label AND holder_instance = p_instance) OR until_us <= v_now);
        COMMIT;
        SELECT TRUE AS acquired, p_label AS holder_label, p_instance AS holder_instance, v_next AS token,
               CAST(1 AS SIGNED) AS seq, GREATEST(0, v_now + p_ttl_us - {{now_us}}) AS remaining_us,
               v_now AS decided_us, p_payload AS payload, CAST(0 AS SIGNED) AS position;
    ELSE
        IF p_wait THEN
            DELETE FROM {{waiters}} WHERE name = p_name AND until_us <= v_now;
            INSERT INTO {{waiters}} (name, holder_label, holder_instance, until_us)
            VALUES (p_name, p_label, p_instance, v_expires + 2 * p_ttl_us)
            ON DUPLICATE KEY UPDATE until_us = VALUES(until_us);
            SELECT w.ticket INTO v_ticket FROM {{waiters}} AS w
            WHERE w.name = p_name AND w.holder_label = p_label AND w.holder_instance = p_instance;
            SELECT COUNT(*) INTO v_position FROM {{waiters}} AS w WHERE w.name = p_name AND w.ticket <= v_ticket;
        END IF;
        COMMIT;
        SELECT FALSE AS acquired, v_label AS holder_label, v_instance AS holder_instance, v_token AS token,
               v_seq AS seq, GREATEST(0, v_expires - {{now_us}}) AS remaining_us,
               v_now AS decided_us, v_payload AS payload, v_position AS position;
    END IF;
END //

DELIMITER ;
