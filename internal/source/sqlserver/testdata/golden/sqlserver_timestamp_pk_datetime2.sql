-- fetch first
SELECT TOP (@p2) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] < DATEADD(millisecond, -@p1, SYSUTCDATETIME()) ORDER BY [updated_at], [id]
-- fetch after
SELECT TOP (@p4) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] >= @p1 AND ([updated_at] > @p1 OR [id] > @p2) AND [updated_at] < DATEADD(millisecond, -@p3, SYSUTCDATETIME()) ORDER BY [updated_at], [id]
-- stamp check (argument 600)
SELECT TOP (1) [updated_at], [id] FROM [dbo].[orders] WHERE [updated_at] > DATEADD(second, @p1, SYSUTCDATETIME())
