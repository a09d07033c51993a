-- revision 1
-- renew(batch): a compare-and-set on (holder, token, seq) per lease, still
-- held by the server's clock, for a JSON array of
-- [name, label, instance, token, seq, ttl_us]. Every lease of the batch is
-- locked first, then the clock is read once: the decision and the update
-- use that one reading. One row: a JSON array of
-- [ord, renewed, known, label, instance, token, seq, released, expires_us]
-- describing each lease before the update, the clock reading the decision
-- used (decided_us) and the clock at the end (now_us).
DROP PROCEDURE IF EXISTS {{renew}};
DELIMITER //
CREATE PROCEDURE {{renew}}(IN p_batch LONGTEXT CHARACTER SET utf8mb4)
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
DELIMITER ;
