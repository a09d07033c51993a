-- revision 1
-- check_lease_strict(name, token, label, instance, seq) is check_lease that
-- also requires the holder and the renewal seq to match, and advances seq
-- by one; its one row is the new seq, which the holder must renew with
-- next. A mismatch of holder or seq raises SQLSTATE TF003. It locks the
-- lease row exclusively until the caller's transaction ends: of two
-- byte-identical clones only one can pass.
DROP PROCEDURE IF EXISTS {{check_lease_strict}};
DELIMITER //
CREATE PROCEDURE {{check_lease_strict}}(
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
