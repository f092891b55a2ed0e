SELECT v FROM no_such_table WHERE k = 1;
