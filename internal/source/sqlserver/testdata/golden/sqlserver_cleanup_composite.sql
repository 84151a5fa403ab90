-- fetch first
SELECT TOP (@p2) [id], [customer], [amount], [updated_at], [region] FROM [dbo].[orders] WHERE [updated_at] < DATEADD(millisecond, -@p1, SYSUTCDATETIME()) ORDER BY [updated_at], [region], [id]
-- fetch after
SELECT TOP (@p5) [id], [customer], [amount], [updated_at], [region] FROM [dbo].[orders] WHERE [updated_at] >= @p1 AND ([updated_at] > @p1 OR ([region] > @p2 OR ([region] = @p2 AND [id] > @p3))) AND [updated_at] < DATEADD(millisecond, -@p4, SYSUTCDATETIME()) ORDER BY [updated_at], [region], [id]
-- stamp check (argument 600)
SELECT TOP (1) [updated_at], [region], [id] FROM [dbo].[orders] WHERE [updated_at] > DATEADD(second, @p1, SYSUTCDATETIME())
-- cleanup (delete delivered rows)
DELETE TOP (@p1) FROM [dbo].[orders] WHERE [updated_at] <= @p2 AND ([updated_at] < @p2 OR ([region] < @p3 OR ([region] = @p3 AND [id] <= @p4)))
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT TOP (@p4) 1 FROM [dbo].[orders] WHERE [updated_at] <= @p1 AND ([updated_at] < @p1 OR ([region] < @p2 OR ([region] = @p2 AND [id] <= @p3)))) w
