CREATE DATABASE airflow OWNER venice;
