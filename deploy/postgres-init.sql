-- One database per Aggregator (they never share one): created on the first start.
CREATE DATABASE ppm_leader;
CREATE DATABASE ppm_helper;
