"""Work submitted, then polled, as data: task APIs (`TaskFamily`, videos and images) and provider batch APIs."""
