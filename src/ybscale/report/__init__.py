"""What a reader sees: charts, the findings page, the design page."""
