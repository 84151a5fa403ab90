-- fetch first
SELECT TOP (@p2) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] < DATEADD(millisecond, -@p1, SYSDATETIMEOFFSET()) ORDER BY [updated_at], [id]
-- fetch after
SELECT TOP (@p4) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] >= @p1 AND ([updated_at] > @p1 OR [id] > @p2) AND [updated_at] < DATEADD(millisecond, -@p3, SYSDATETIMEOFFSET()) ORDER BY [updated_at], [id]
-- cleanup (delete delivered rows older than 168h0m0s)
DELETE TOP (@p1) FROM [dbo].[orders] WHERE [updated_at] <= @p2 AND ([updated_at] < @p2 OR [id] <= @p3) AND [updated_at] < DATEADD(millisecond, -@p4, SYSDATETIMEOFFSET())
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT TOP (@p4) 1 FROM [dbo].[orders] WHERE [updated_at] <= @p1 AND ([updated_at] < @p1 OR [id] <= @p2) AND [updated_at] < DATEADD(millisecond, -@p3, SYSDATETIMEOFFSET())) w
