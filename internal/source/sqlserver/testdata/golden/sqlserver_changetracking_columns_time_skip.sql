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
SELECT TOP (@p4) ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_OPERATION, CASE WHEN t.[id] IS NULL THEN 0 ELSE 1 END, (SELECT DATEADD(minute, -DATEPART(tzoffset, SYSDATETIMEOFFSET()), cm.commit_time) FROM sys.dm_tran_commit_table AS cm WHERE cm.commit_ts = ct.SYS_CHANGE_VERSION), CASE WHEN ct.SYS_CHANGE_COLUMNS IS NULL THEN 1 ELSE 0 END, COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'id', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'customer', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'amount', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), ct.[id], t.[customer], t.[amount] FROM CHANGETABLE(CHANGES [dbo].[it's], @p1) AS ct LEFT JOIN [dbo].[it's] AS t ON t.[id] = ct.[id] WHERE ct.SYS_CHANGE_VERSION > @p2 AND ct.SYS_CHANGE_VERSION <= @p3 AND (ct.SYS_CHANGE_CONTEXT IS NULL OR ct.SYS_CHANGE_CONTEXT <> 0x6F72646572732D617070) ORDER BY ct.SYS_CHANGE_VERSION, ct.[id]
-- fetch inside a version (base, version, key..., current version, limit)
SELECT TOP (@p5) ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_OPERATION, CASE WHEN t.[id] IS NULL THEN 0 ELSE 1 END, (SELECT DATEADD(minute, -DATEPART(tzoffset, SYSDATETIMEOFFSET()), cm.commit_time) FROM sys.dm_tran_commit_table AS cm WHERE cm.commit_ts = ct.SYS_CHANGE_VERSION), CASE WHEN ct.SYS_CHANGE_COLUMNS IS NULL THEN 1 ELSE 0 END, COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'id', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'customer', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), COALESCE(CHANGE_TRACKING_IS_COLUMN_IN_MASK(COLUMNPROPERTY(OBJECT_ID(N'[dbo].[it''s]'), N'amount', 'ColumnId'), ct.SYS_CHANGE_COLUMNS), 0), ct.[id], t.[customer], t.[amount] FROM CHANGETABLE(CHANGES [dbo].[it's], @p1) AS ct LEFT JOIN [dbo].[it's] AS t ON t.[id] = ct.[id] WHERE ct.SYS_CHANGE_VERSION >= @p2 AND (ct.SYS_CHANGE_VERSION > @p2 OR ct.[id] > @p3) AND ct.SYS_CHANGE_VERSION <= @p4 AND (ct.SYS_CHANGE_CONTEXT IS NULL OR ct.SYS_CHANGE_CONTEXT <> 0x6F72646572732D617070) ORDER BY ct.SYS_CHANGE_VERSION, ct.[id]
-- waiting from a version boundary
SELECT COUNT(*) FROM (SELECT TOP (@p4) ct.SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES [dbo].[it's], @p1) AS ct WHERE ct.SYS_CHANGE_VERSION > @p2 AND ct.SYS_CHANGE_VERSION <= @p3 AND (ct.SYS_CHANGE_CONTEXT IS NULL OR ct.SYS_CHANGE_CONTEXT <> 0x6F72646572732D617070)) w
-- waiting inside a version
SELECT COUNT(*) FROM (SELECT TOP (@p5) ct.SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES [dbo].[it's], @p1) AS ct WHERE ct.SYS_CHANGE_VERSION >= @p2 AND (ct.SYS_CHANGE_VERSION > @p2 OR ct.[id] > @p3) AND ct.SYS_CHANGE_VERSION <= @p4 AND (ct.SYS_CHANGE_CONTEXT IS NULL OR ct.SYS_CHANGE_CONTEXT <> 0x6F72646572732D617070)) w
