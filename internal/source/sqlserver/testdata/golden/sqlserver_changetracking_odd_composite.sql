-- check (argument: the quoted table name)
SELECT DB_NAME(), USER_NAME(), CASE WHEN OBJECT_ID(@p1) IS NULL THEN 0 ELSE 1 END,
  CASE WHEN CHANGE_TRACKING_CURRENT_VERSION() IS NOT NULL OR EXISTS (SELECT 1 FROM sys.change_tracking_databases WHERE database_id = DB_ID()) THEN 1 ELSE 0 END,
  (SELECT CONCAT(retention_period, ' ', retention_period_units_desc) FROM sys.change_tracking_databases WHERE database_id = DB_ID()),
  CASE WHEN EXISTS (SELECT 1 FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(@p1)) THEN 1 ELSE 0 END,
  (SELECT snapshot_isolation_state_desc FROM sys.databases WHERE database_id = DB_ID()),
  COALESCE(HAS_PERMS_BY_NAME(@p1, 'OBJECT', 'VIEW CHANGE TRACKING'), 0),
  COALESCE((SELECT CAST(is_track_columns_updated_on AS int) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(@p1)), 0),
  (SELECT c.name AS [name] FROM sys.indexes i
    JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id
    JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
    WHERE i.object_id = OBJECT_ID(@p1) AND i.is_primary_key = 1 AND ic.key_ordinal > 0
    ORDER BY ic.key_ordinal FOR JSON PATH)
-- the bound, before the snapshot transaction
SELECT CHANGE_TRACKING_CURRENT_VERSION()
-- the minimum valid version, in the snapshot transaction (argument: the quoted table name)
SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(@p1))
-- fetch from a version boundary (base, version, current version, limit)
SELECT TOP (@p4) ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_OPERATION, CASE WHEN t.[region]]] IS NULL THEN 0 ELSE 1 END, ct.[Row ID], t.[it's], ct.[region]]] FROM CHANGETABLE(CHANGES [my schema].[Order "Details" [x]]], @p1) AS ct LEFT JOIN [my schema].[Order "Details" [x]]] AS t ON t.[region]]] = ct.[region]]] AND t.[Row ID] = ct.[Row ID] WHERE ct.SYS_CHANGE_VERSION > @p2 AND ct.SYS_CHANGE_VERSION <= @p3 ORDER BY ct.SYS_CHANGE_VERSION, ct.[region]]], ct.[Row ID]
-- fetch inside a version (base, version, key..., current version, limit)
SELECT TOP (@p6) ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_OPERATION, CASE WHEN t.[region]]] IS NULL THEN 0 ELSE 1 END, ct.[Row ID], t.[it's], ct.[region]]] FROM CHANGETABLE(CHANGES [my schema].[Order "Details" [x]]], @p1) AS ct LEFT JOIN [my schema].[Order "Details" [x]]] AS t ON t.[region]]] = ct.[region]]] AND t.[Row ID] = ct.[Row ID] WHERE ct.SYS_CHANGE_VERSION >= @p2 AND (ct.SYS_CHANGE_VERSION > @p2 OR (ct.[region]]] > @p3 OR (ct.[region]]] = @p3 AND ct.[Row ID] > @p4))) AND ct.SYS_CHANGE_VERSION <= @p5 ORDER BY ct.SYS_CHANGE_VERSION, ct.[region]]], ct.[Row ID]
-- waiting from a version boundary
SELECT COUNT(*) FROM (SELECT TOP (@p4) ct.SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES [my schema].[Order "Details" [x]]], @p1) AS ct WHERE ct.SYS_CHANGE_VERSION > @p2 AND ct.SYS_CHANGE_VERSION <= @p3) w
-- waiting inside a version
SELECT COUNT(*) FROM (SELECT TOP (@p6) ct.SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES [my schema].[Order "Details" [x]]], @p1) AS ct WHERE ct.SYS_CHANGE_VERSION >= @p2 AND (ct.SYS_CHANGE_VERSION > @p2 OR (ct.[region]]] > @p3 OR (ct.[region]]] = @p3 AND ct.[Row ID] > @p4))) AND ct.SYS_CHANGE_VERSION <= @p5) w
