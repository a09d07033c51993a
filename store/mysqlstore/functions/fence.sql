-- revision 1
-- fence(resource, token) records token as the highest token resource has
-- accepted, or raises SQLSTATE TF001 when a greater one was recorded
-- before. An equal token passes. It runs in the caller's transaction and
-- locks the resource's fence row until that transaction ends, so fenced
-- writes to one resource commit in token order; a rolled-back transaction
-- leaves the fence as it was.
DROP PROCEDURE IF EXISTS {{fence}};
DELIMITER //
CREATE PROCEDURE {{fence}}(IN p_resource VARBINARY(255), IN p_token BIGINT)
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
DELIMITER ;
