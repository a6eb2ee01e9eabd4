//! AdamW, learning-rate schedules and gradient clipping (to be written).
