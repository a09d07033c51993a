-- revision 1
-- acquire_lease(name, label, instance, ttl_us, payload): a new tenure when
-- the lease is absent, released or expired, taking payload; otherwise
-- nothing changes. One row: acquired, holder_label, holder_instance, token,
-- seq, remaining_us, decided_us (the server's clock when it decided),
-- payload (the holder's, whoever holds the lease). This library calls
-- acquire_or_wait; acquire_lease stays for workers of libraries from
-- before the line, which call it.
DROP PROCEDURE IF EXISTS {{acquire_lease}};
DELIMITER //
CREATE PROCEDURE {{acquire_lease}}(
    IN p_name VARBINARY(255), IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_ttl_us BIGINT,
    IN p_payload VARBINARY(1024))
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    DECLARE v_label VARBINARY(128);
    DECLARE v_instance VARBINARY(64);
    DECLARE v_token, v_seq, v_expires, v_now, v_next BIGINT;
    DECLARE v_released BOOLEAN;
    DECLARE v_payload VARBINARY(1024);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
    IF p_name IS NULL OR p_label IS NULL OR p_instance IS NULL OR p_ttl_us IS NULL OR p_ttl_us <= 0
       OR p_payload IS NULL THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'tenure: acquire: arguments must not be null and the TTL must be positive';
    END IF;
    START TRANSACTION;
    -- Create the row as a released placeholder, or lock the existing one
    -- exclusively: racing acquisitions of one name queue here.
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
        COMMIT;
        SELECT TRUE AS acquired, p_label AS holder_label, p_instance AS holder_instance, v_next AS token,
               CAST(1 AS SIGNED) AS seq, GREATEST(0, v_now + p_ttl_us - {{now_us}}) AS remaining_us,
               v_now AS decided_us, p_payload AS payload;
    ELSE
        COMMIT;
        SELECT FALSE AS acquired, v_label AS holder_label, v_instance AS holder_instance, v_token AS token,
               v_seq AS seq, GREATEST(0, v_expires - {{now_us}}) AS remaining_us,
               v_now AS decided_us, v_payload AS payload;
    END IF;
END //
DELIMITER ;
