-- revision 1
-- release(name, label, instance, token): expire the lease now when it is
-- held by this holder with this token, keeping the row and the counter.
-- One row: the number of leases released (0 or 1).
DROP PROCEDURE IF EXISTS {{release}};
DELIMITER //
CREATE PROCEDURE {{release}}(
    IN p_name VARBINARY(255), IN p_label VARBINARY(128), IN p_instance VARBINARY(64), IN p_token BIGINT)
    MODIFIES SQL DATA
    SQL SECURITY DEFINER
BEGIN
    UPDATE {{leases}} SET released = TRUE, expires_us = {{now_us}}
    WHERE name = p_name AND holder_label = p_label AND holder_instance = p_instance AND token = p_token
      AND NOT released AND expires_us > {{now_us}};
    SELECT ROW_COUNT() AS released;
END //
DELIMITER ;
