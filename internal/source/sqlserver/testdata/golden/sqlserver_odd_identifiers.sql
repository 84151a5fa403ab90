-- fetch first
SELECT TOP (@p1) [Row ID], [it's] FROM [my schema].[Order "Details" [x]]] ORDER BY [Row ID]
-- fetch after
SELECT TOP (@p2) [Row ID], [it's] FROM [my schema].[Order "Details" [x]]] WHERE [Row ID] > @p1 ORDER BY [Row ID]
