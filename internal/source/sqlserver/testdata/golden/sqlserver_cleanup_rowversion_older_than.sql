-- fetch first
SELECT TOP (@p2) [id], [customer], [amount], [updated_at], [rv] FROM [dbo].[orders] WHERE [rv] < @p1 ORDER BY [rv], [id]
-- fetch after
SELECT TOP (@p4) [id], [customer], [amount], [updated_at], [rv] FROM [dbo].[orders] WHERE [rv] >= @p1 AND ([rv] > @p1 OR [id] > @p2) AND [rv] < @p3 ORDER BY [rv], [id]
-- backlog first (no bound on open transactions)
SELECT TOP (@p1) [id], [customer], [amount], [updated_at], [rv] FROM [dbo].[orders] ORDER BY [rv], [id]
-- backlog after
SELECT TOP (@p3) [id], [customer], [amount], [updated_at], [rv] FROM [dbo].[orders] WHERE [rv] >= @p1 AND ([rv] > @p1 OR [id] > @p2) ORDER BY [rv], [id]
-- cleanup (delete delivered rows older than 720h0m0s)
DELETE TOP (@p1) FROM [dbo].[orders] WHERE [rv] <= @p2 AND ([rv] < @p2 OR [id] <= @p3) AND [updated_at] < DATEADD(second, -@p4, SYSUTCDATETIME())
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT TOP (@p4) 1 FROM [dbo].[orders] WHERE [rv] <= @p1 AND ([rv] < @p1 OR [id] <= @p2) AND [updated_at] < DATEADD(second, -@p3, SYSUTCDATETIME())) w
