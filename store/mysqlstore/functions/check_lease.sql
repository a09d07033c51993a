-- revision 1
-- check_lease(name, token) returns when lease name is held with token by
-- the server's clock, read after the row lock was granted, and raises
-- SQLSTATE TF002 otherwise. It share-locks the lease row until the
-- caller's transaction ends: a takeover (and the holder's own renewal)
-- waits for that transaction.
DROP PROCEDURE IF EXISTS {{check_lease}};
DELIMITER //
CREATE PROCEDURE {{check_lease}}(IN p_name VARBINARY(255), IN p_token BIGINT)
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
DELIMITER ;
